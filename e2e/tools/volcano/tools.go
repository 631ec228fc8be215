//go:build tools

// The main packages this module builds (e2e/tools/build.sh): imported here so `go mod tidy` keeps them.
package tools

import (
	_ "volcano.sh/volcano/cmd/controller-manager"
	_ "volcano.sh/volcano/cmd/scheduler"
	_ "volcano.sh/volcano/cmd/webhook-manager"
)
