"""The stack: every area composed into one config model, validated and resolved once, then planned."""
