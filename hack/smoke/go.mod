module tatara.dev/hack/smoke

go 1.26.8
