"""Stack files that are not a configuration at all, each (file text, where the message points, text it
must hold): tests/stack/validation/test_bad_stack_files.py checks the render's one-line refusal,
e2e/tests/test_stack_file.py
that the Pulumi CLI refuses each too. `None`: a file that is not UTF-8 (written by the tests)."""

GOOD = "config:\n  azure-native:location: eastus\n  aks-infiniband:ibPool:\n    vmSize: Standard_ND96isr_H100_v5\n" \
       "    nodeCount: 2\n"
CASES = {
    "syntax-unclosed-flow-mapping": (
        "config:\n  azure-native:location: eastus\n  aks-infiniband:ibPool: {vmSize: Standard_ND96isr_H100_v5\n",
        ":4:1:", "begun at line 3, column 26"),
    "tab-indentation": (
        "config:\n  azure-native:location: eastus\n  aks-infiniband:ibPool:\n\tvmSize: Standard_ND96isr_H100_v5\n",
        ":4:1:", "a tab in the indentation"),
    "config-as-a-list": ("config:\n  - azure-native:location: eastus\n", ":1:1:", "config: got a list"),
    "file-is-a-list": ("- config\n", ":1:1:", "the file holds a list"),
    "duplicate-top-level-key": (GOOD + "  azure-native:location: westus\n", ":6:3:",
                                "'azure-native:location' is given twice (first on line 2)"),
    "duplicate-nested-key": (GOOD + "    nodeCount: 4\n", ":6:5:", "'nodeCount' is given twice (first on line 5)"),
    "number-as-a-key": (GOOD + "  5: x\n", ":6:3:", "the key 5 is a number; a config key is a namespace and a name"),
    "null-as-a-key": (GOOD + "  ~: x\n", ":6:3:", "the key None is a null"),
    "not-utf8": (None, ":", "not UTF-8 text"),
    "two-documents": (GOOD + "---\nconfig: {}\n", ":6:1:", "expected a single document"),
    "binary-not-text": (GOOD + "  aks-infiniband:clusterName: !!binary //79\n", ":6:31:", "!!binary value that is not"),
    "bad-indentation": ("config:\n  azure-native:location: eastus\n   aks-infiniband:rdmaMode: shared\n", ":3:",
                        "a line indented deeper than the one before it"),
}
