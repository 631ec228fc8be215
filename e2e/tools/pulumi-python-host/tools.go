//go:build tools

// The main package this module builds (e2e/tools/build.sh): imported here so `go mod tidy` keeps it.
package tools

import _ "github.com/pulumi/pulumi/sdk/v3/python/cmd/pulumi-language-python"
