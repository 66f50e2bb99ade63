// Command hello is the package testutil's tests build.
package main

import (
	"fmt"
	"os"
)

func main() {
	fmt.Println("hello", len(os.Args)-1)
}
