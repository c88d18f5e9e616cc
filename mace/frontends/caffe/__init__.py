"""Caffe frontend: frontend.py drives it; model_file.py reads .prototxt / .caffemodel;
ops_*.py map Caffe layer types to IR ops; caffe_pb2.py is generated from
third_party/caffe/caffe.proto by tools/gen_proto.py."""
