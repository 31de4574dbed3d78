#!/usr/bin/env bash
# Builds sarama-driver from the pinned go.mod/go.sum (modules from the Go
# module proxy). Idempotent.
set -euo pipefail
cd "$(dirname "$0")"
go build -buildvcs=false -o sarama-driver .
