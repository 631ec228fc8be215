"""Runs the real program under Pulumi's mock engine: no cloud, no CLI, no credentials.

Used by the tests and by `make synth`; see `engine.render`.
"""
