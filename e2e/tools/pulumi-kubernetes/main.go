// pulumi-resource-kubernetes: the provider's own main (cmd/pulumi-resource-kubernetes/main.go of the
// pinned provider/v4), serving the schema and Terraform mapping that gen/ writes beside this file.
package main

import (
	_ "embed"

	"github.com/pulumi/pulumi-kubernetes/provider/v4/pkg/provider"
	"github.com/pulumi/pulumi-kubernetes/provider/v4/pkg/version"
)

//go:embed schema-embed.json
var pulumiSchema []byte

//go:embed terraform-mapping-embed.json
var terraformMapping []byte

func main() {
	provider.Serve("kubernetes", version.Version, pulumiSchema, terraformMapping)
}
