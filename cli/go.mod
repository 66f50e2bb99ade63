module tatara.dev/cli

go 1.26.8
