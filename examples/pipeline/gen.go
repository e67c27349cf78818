package main

//go:generate go run github.com/flowlite/flowlite/cmd/flowdefgen pipeline.yaml
