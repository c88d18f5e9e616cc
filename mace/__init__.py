"""pymace: deploy neural networks from one MACE-style deployment file.

Data flows one way: config -> frontend -> IR -> passes -> runtime -> results.
"""
__version__ = "0.1.0"
