"""The built-in example environment: a small local issue tracker and its four arms."""
