"""TFLite frontend: a .tflite FlatBuffer -> Graph (NHWC, TFLite's own layout and ours)."""
