package main

//go:generate go tool flowdefgen pipeline.yaml
