"""The foundation every area builds on: errors, base model, scalar types, plan objects, registries."""
