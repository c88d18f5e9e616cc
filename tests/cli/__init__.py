"""Tests of mace.cli."""
