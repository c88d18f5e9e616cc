"""MACE-style accuracy plugin for the digits example: top-1 over the 450 held-out images of
scikit-learn's digits set (test_set.npz). Name it in a deployment file as

    accuracy_validation_script: examples/digits/accuracy_validator.py

and `python tools/converter.py run --config=...` runs it through the converted model
(see examples/digits/digits_accuracy.yml). The interface is MACE's AccuracyValidator:
sample_size, batch_size, preprocess, postprocess, result.
"""
import os

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))   # MACE: do not rely on the working directory


class AccuracyValidator(object):
    def __init__(self, **kwargs):
        with np.load(os.path.join(HERE, "test_set.npz")) as z:
            self._images = z["images"]            # (N, 1, 8, 8) NCHW float32 in [-1, 1]
            self._labels = z["labels"]
        self._correct = 0
        self._seen = 0

    def sample_size(self):
        return len(self._labels)

    def batch_size(self):
        return 1  # the deployment file's input_shapes batch

    def preprocess(self, sample_idx_start, sample_idx_end, **kwargs):
        # the deployment file feeds NHWC (1,8,8,1): one list entry per sample, as MACE's sample does
        batch = [self._images[i].transpose(1, 2, 0).tolist()
                 for i in range(sample_idx_start, min(sample_idx_end, self.sample_size()))]
        return {"image": batch}

    def postprocess(self, sample_idx_start, sample_idx_end, output_map, **kwargs):
        end = min(sample_idx_end, self.sample_size())
        prob = np.asarray(output_map["prob"]).reshape(end - sample_idx_start, -1)
        predicted = prob.argmax(axis=-1)
        self._correct += int((predicted == self._labels[sample_idx_start:end]).sum())
        self._seen += end - sample_idx_start

    def result(self):
        top1 = self._correct / float(self._seen)
        print("Top 1 accuracy: %f (%d/%d)" % (top1, self._correct, self._seen))
        return {"top1": top1, "correct": self._correct, "samples": self._seen}
