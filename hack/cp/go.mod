module tatara.local/cp

go 1.26.8
