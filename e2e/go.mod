module tatara.dev/e2e

go 1.26.8

require (
	github.com/google/uuid v1.6.0 // indirect
	github.com/mark3labs/mcp-go v1.2.1 // indirect
)
