"""The committed zoo against its definitions (models/zoo/zoo_models.py), with PyTorch: every model rebuilt
from zoo_models.py with the weights read back from its ONNX file (as scripts/zoo_bench.py does) reproduces
the committed test data; the exports keep their BatchNormalization nodes, their dynamic dimensions and their
opsets; zoo.json describes the files. Needs Debian's python3-torch and python3-onnx (scripts/install-deps.sh
--dev); without them it exits 77, which CTest reports as skipped. CTest runs it as `zoo_models_pytorch`.
"""
import json
import os
import sys
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
ZOO = os.path.join(os.path.dirname(os.path.dirname(HERE)), "models", "zoo")

try:
    import onnx
    import torch
    from onnx import numpy_helper
except ImportError as e:
    print(f"SKIPPED: the zoo's PyTorch checks need torch and onnx ({e}); scripts/install-deps.sh --dev")
    sys.exit(77)

sys.path.insert(0, ZOO)
import zoo_models  # noqa: E402


def read_tensor(path):
    return torch.from_numpy(numpy_helper.to_array(onnx.load_tensor(path)).copy())


class ZooModelsTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        torch.set_num_threads(1)
        with open(os.path.join(ZOO, "zoo.json")) as f:
            cls.index = {m["name"]: m for m in json.load(f)["models"]}

    def test_index_lists_every_model_and_folder(self):
        folders = sorted(d for d in os.listdir(ZOO) if os.path.isdir(os.path.join(ZOO, d)) and d != "__pycache__")
        self.assertEqual(folders, sorted(m.name for m in zoo_models.ZOO))
        self.assertEqual(sorted(self.index), folders)
        self.assertGreaterEqual(len(folders), 15)
        self.assertEqual({m.opset for m in zoo_models.ZOO}, {11, 13, 17})

    def test_each_model(self):
        for spec in zoo_models.ZOO:
            with self.subTest(model=spec.name):
                self.check_model(spec)

    def check_model(self, spec):
        folder = os.path.join(ZOO, spec.name)
        proto = onnx.load(os.path.join(folder, "model.onnx"))
        entry = self.index[spec.name]
        self.assertEqual(proto.opset_import[0].version, spec.opset)
        self.assertEqual(entry["model_bytes"], os.path.getsize(os.path.join(folder, "model.onnx")))

        # Batch-norm layers reach cnnrt as BatchNormalization nodes, not folded by the exporter.
        module = spec.build()
        norms = sum(isinstance(m, (torch.nn.BatchNorm1d, torch.nn.BatchNorm2d)) for m in module.modules())
        self.assertEqual(sum(n.op_type == "BatchNormalization" for n in proto.graph.node), norms)

        # Dynamic batch; dynamic height and width for the image-to-image models only.
        (graph_input,) = proto.graph.input
        dims = [d.dim_param or d.dim_value for d in graph_input.type.tensor_type.shape.dim]
        self.assertEqual(graph_input.name, spec.input_name)
        self.assertEqual(dims[0], "N")
        expected = ["H", "W"] if spec.image_to_image else list(spec.test_shape[2:])
        self.assertEqual(dims[2:], expected)

        # The rebuilt module computes the committed answer: in float64 to rounding, in float32 within the
        # zoo's tolerance.
        zoo_models.load_onnx_weights(module, proto)
        x = read_tensor(os.path.join(folder, "test_data_set_0", "input_0.pb"))
        want = read_tensor(os.path.join(folder, "test_data_set_0", "output_0.pb")).double()
        self.assertEqual(tuple(x.shape), spec.test_shape)
        with torch.no_grad():
            got32 = module(x).double()
            got64 = module.double()(x.double())
        self.assertEqual(list(want.shape), entry["test_output_shape"])
        self.assertLessEqual(float((got64 - want).abs().max()), 1e-6 * float(want.abs().max()) + 1e-7)
        excess = ((got32 - want).abs() / (zoo_models.ATOL + zoo_models.RTOL * want.abs())).max()
        self.assertLess(float(excess), 0.5)
        # Outputs of order 1, so that an absolute tolerance of 1e-4 is tight.
        self.assertGreater(float(want.std()), 0.05)

    def test_loading_refuses_other_weights(self):
        proto = onnx.load(os.path.join(ZOO, "resnet20", "model.onnx"))
        with self.assertRaises(ValueError) as e:
            zoo_models.load_onnx_weights(zoo_models.BY_NAME["densenet_bc"].build(), proto)
        self.assertIn("missing", str(e.exception))


if __name__ == "__main__":
    unittest.main()
