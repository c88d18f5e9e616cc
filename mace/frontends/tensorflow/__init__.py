"""TensorFlow frontend: loader.py reads/freezes the model, frontend.py drives the
conversion, ops_*.py map TensorFlow op types to IR ops. TensorFlow itself is
imported only when a TensorFlow model is converted or validated."""
