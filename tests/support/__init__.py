"""What the tests share: case lists, references, the pretend device, fakes."""
