module tatara.dev/hack/pause

go 1.26.8
