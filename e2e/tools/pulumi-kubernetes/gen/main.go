// gen writes the two files the provider's main embeds, as the provider's own generate step does
// (cmd/pulumi-resource-kubernetes/generate.go of the pinned provider/v4): the module's schema.json with
// its version set, and its terraform-mapping.json, each re-serialised compactly. The module's copies are
// read from the module cache, so nothing here comes from elsewhere.
//
//	go run ./gen VERSION SOURCE_DIR OUT_DIR
package main

import (
	"encoding/json"
	"log"
	"os"
	"path/filepath"

	"github.com/pulumi/pulumi/pkg/v3/codegen/schema"
)

func main() {
	if len(os.Args) != 4 {
		log.Fatal("usage: gen VERSION SOURCE_DIR OUT_DIR")
	}
	version, source, out := os.Args[1], os.Args[2], os.Args[3]

	contents, err := os.ReadFile(filepath.Join(source, "schema.json"))
	if err != nil {
		log.Fatal(err)
	}
	var spec schema.PackageSpec
	if err := json.Unmarshal(contents, &spec); err != nil {
		log.Fatalf("cannot deserialize schema: %v", err)
	}
	spec.Version = version
	versioned, err := json.Marshal(spec)
	if err != nil {
		log.Fatalf("cannot reserialize schema: %v", err)
	}
	if err := os.WriteFile(filepath.Join(out, "schema-embed.json"), versioned, 0o600); err != nil {
		log.Fatal(err)
	}

	contents, err = os.ReadFile(filepath.Join(source, "terraform-mapping.json"))
	if err != nil {
		log.Fatal(err)
	}
	var mapping interface{}
	if err := json.Unmarshal(contents, &mapping); err != nil {
		log.Fatalf("cannot deserialize terraform mapping: %v", err)
	}
	compact, err := json.Marshal(mapping)
	if err != nil {
		log.Fatalf("cannot reserialize terraform mapping: %v", err)
	}
	if err := os.WriteFile(filepath.Join(out, "terraform-mapping-embed.json"), compact, 0o600); err != nil {
		log.Fatal(err)
	}
}
