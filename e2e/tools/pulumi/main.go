// pulumi-config reads a stack file as the Pulumi CLI does before it starts a program: the project and
// the stack file through the SDK's workspace loaders (gopkg.in/yaml.v3 and config.Map, key parsing
// included), then the project's declared types checked and its defaults applied
// (pkg/v3/workspace.ValidateStackConfigAndApplyProjectConfig, the call `pulumi preview` and `up` make).
// It prints one JSON object: {"config": {key: the string the program is handed}} or {"error": "..."}.
// Secure values stay as their ciphertext (nothing is decrypted here).
//
//	pulumi-config PROJECT_FILE STACK_FILE STACK_NAME
package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"

	pkgworkspace "github.com/pulumi/pulumi/pkg/v3/workspace"
	"github.com/pulumi/pulumi/sdk/v3/go/common/esc"
	"github.com/pulumi/pulumi/sdk/v3/go/common/resource/config"
	"github.com/pulumi/pulumi/sdk/v3/go/common/workspace"
)

func read(projectFile, stackFile, stackName string) (map[string]string, error) {
	project, err := workspace.LoadProject(projectFile)
	if err != nil {
		return nil, err
	}
	stack, err := workspace.LoadProjectStack(nil, project, stackFile)
	if err != nil {
		return nil, err
	}
	err = pkgworkspace.ValidateStackConfigAndApplyProjectConfig(context.Background(), stackName, project,
		esc.Value{}, stack.Config, config.NopEncrypter, config.NopDecrypter)
	if err != nil {
		return nil, err
	}
	values, err := stack.Config.Decrypt(config.NopDecrypter)
	if err != nil {
		return nil, err
	}
	out := make(map[string]string, len(values))
	for key, value := range values {
		out[key.String()] = value
	}
	return out, nil
}

func main() {
	if len(os.Args) != 4 {
		fmt.Fprintln(os.Stderr, "usage: pulumi-config PROJECT_FILE STACK_FILE STACK_NAME")
		os.Exit(2)
	}
	values, err := read(os.Args[1], os.Args[2], os.Args[3])
	result := map[string]any{"config": values}
	if err != nil {
		result = map[string]any{"error": err.Error()}
	}
	text, err := json.Marshal(result)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	fmt.Println(string(text))
}
