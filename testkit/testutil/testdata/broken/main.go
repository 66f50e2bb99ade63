// Command broken does not compile: testutil's tests check a failed build's message.
package main

func main() {
	var n int = "not an int"
	_ = n
}
