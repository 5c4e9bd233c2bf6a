"""The null tier: runs anywhere, no GPU needed."""
