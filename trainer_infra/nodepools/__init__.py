"""GPU node pools (`nodePools[]`): the pool model, and per backend the code that creates or labels nodes."""
