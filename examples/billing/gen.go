package main

//go:generate go tool flowdefgen billing.yaml
