// Package web holds the dashboard's single-page app, built from src/ by `make -C dashboard/web build` and
// committed under dist/ so that `go build` needs no Node toolchain.
package web

import "embed"

// Dist is the built app: dist/index.html, dist/app.js, dist/app.css (serve it with fs.Sub(Dist, "dist")).
//
//go:embed dist
var Dist embed.FS
