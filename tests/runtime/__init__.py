"""Tests of mace.runtime."""
