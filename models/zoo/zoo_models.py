"""The architectures of the model zoo (models/zoo/), as plain torch.nn modules.

make_zoo.py builds each one with seeded random weights and exports it; scripts/zoo_bench.py rebuilds the
same module and loads the exported weights back (load_onnx_weights) to time PyTorch on exactly the model
cnnrt runs. Works with torch 1.13 (Debian 12) and 2.x: nothing here depends on the exporter.

ZOO lists every model with its input, its opset and whether it is image-to-image (dynamic height and
width, benchmarked at fixed image sizes instead of batch sizes).
"""
import torch
import torch.nn as nn
import torch.nn.functional as F


def conv_bn_relu(cin, cout, kernel, stride=1, padding=0, groups=1, relu=True):
    layers = [nn.Conv2d(cin, cout, kernel, stride, padding, groups=groups, bias=False), nn.BatchNorm2d(cout)]
    if relu:
        layers.append(nn.ReLU(inplace=True))
    return nn.Sequential(*layers)


# 1. LeNet-5 --------------------------------------------------------------------------------------------

class LeNet5(nn.Module):
    """LeNet-5 as LeCun et al. (1998) drew it: 32x32 grayscale in; C1 6 maps 5x5, S2 2x2 average pool,
    C3 16 maps 5x5, S4 2x2 average pool, C5 120, F6 84 and 10 outputs fully connected; Tanh throughout."""

    def __init__(self, classes=10):
        super().__init__()
        self.c1 = nn.Conv2d(1, 6, 5)
        self.s2 = nn.AvgPool2d(2)
        self.c3 = nn.Conv2d(6, 16, 5)
        self.s4 = nn.AvgPool2d(2)
        self.c5 = nn.Linear(16 * 5 * 5, 120)
        self.f6 = nn.Linear(120, 84)
        self.output = nn.Linear(84, classes)

    def forward(self, x):
        x = self.s2(torch.tanh(self.c1(x)))
        x = self.s4(torch.tanh(self.c3(x)))
        x = torch.flatten(x, 1)
        x = torch.tanh(self.c5(x))
        x = torch.tanh(self.f6(x))
        return self.output(x)


# 2. Keyword spotting -----------------------------------------------------------------------------------

class KwsCnn(nn.Module):
    """Keyword spotting on 49 frames x 10 MFCC coefficients (1 s of audio, 40 ms windows, 20 ms hop), the
    CNN of "Hello Edge" (Zhang et al. 2017): 28 filters 10x4, 30 filters 10x4 at stride 2x1 (time x
    frequency), a linear low-rank layer of 16, a fully connected 128, 12 classes (10 words, silence,
    unknown)."""

    def __init__(self, classes=12):
        super().__init__()
        self.conv1 = conv_bn_relu(1, 28, (10, 4))                 # 49x10 -> 40x7
        self.conv2 = conv_bn_relu(28, 30, (10, 4), stride=(2, 1))  # 40x7 -> 16x4
        self.lowrank = nn.Linear(30 * 16 * 4, 16)
        self.fc = nn.Linear(16, 128)
        self.output = nn.Linear(128, classes)

    def forward(self, x):
        x = torch.flatten(self.conv2(self.conv1(x)), 1)
        return self.output(F.relu(self.fc(self.lowrank(x))))


# 3. VGG-style ------------------------------------------------------------------------------------------

class VggSmall(nn.Module):
    """VGG-style (Simonyan and Zisserman 2014) on 1x64x64: four stages of two 3x3 convolutions + ReLU and a
    2x2 max pool (16, 32, 64, 128 channels), then two fully connected layers with dropout between."""

    def __init__(self, classes=10, widths=(16, 32, 64, 128)):
        super().__init__()
        layers, cin = [], 1
        for w in widths:
            layers += [nn.Conv2d(cin, w, 3, padding=1), nn.ReLU(inplace=True),
                       nn.Conv2d(w, w, 3, padding=1), nn.ReLU(inplace=True), nn.MaxPool2d(2)]
            cin = w
        self.features = nn.Sequential(*layers)
        self.classifier = nn.Sequential(nn.Linear(cin * 4 * 4, 128), nn.ReLU(inplace=True), nn.Dropout(0.5),
                                        nn.Linear(128, classes))

    def forward(self, x):
        return self.classifier(torch.flatten(self.features(x), 1))


# 4, 5. ResNets -----------------------------------------------------------------------------------------

class BasicBlock(nn.Module):
    """Two 3x3 conv + BN, the first with the block's stride; the shortcut is a 1x1 conv + BN (stride 2)
    where the shape changes, else the identity."""

    def __init__(self, cin, cout, stride):
        super().__init__()
        self.conv1 = conv_bn_relu(cin, cout, 3, stride, 1)
        self.conv2 = conv_bn_relu(cout, cout, 3, 1, 1, relu=False)
        self.shortcut = None
        if stride != 1 or cin != cout:
            self.shortcut = conv_bn_relu(cin, cout, 1, stride, 0, relu=False)

    def forward(self, x):
        identity = x if self.shortcut is None else self.shortcut(x)
        return F.relu(self.conv2(self.conv1(x)) + identity)


class ResNet20(nn.Module):
    """ResNet-20 for CIFAR-10 (He et al. 2015, section 4.2): 3x32x32, a 3x3 conv of 16, three stages of
    three basic blocks (16, 32, 64 channels; the first block of stages 2 and 3 at stride 2 with a 1x1
    projection shortcut), global average pool, 10 classes."""

    def __init__(self, classes=10):
        super().__init__()
        self.stem = conv_bn_relu(3, 16, 3, 1, 1)
        blocks, cin = [], 16
        for stage, w in enumerate((16, 32, 64)):
            for b in range(3):
                blocks.append(BasicBlock(cin, w, 2 if stage > 0 and b == 0 else 1))
                cin = w
        self.blocks = nn.Sequential(*blocks)
        self.fc = nn.Linear(64, classes)

    def forward(self, x):
        x = self.blocks(self.stem(x))
        return self.fc(torch.flatten(F.adaptive_avg_pool2d(x, 1), 1))


class ResNet18Narrow(nn.Module):
    """ResNet-18 (He et al. 2015) at a quarter of its width on 3x224x224: 7x7 stride-2 stem of 16, 3x3
    stride-2 max pool, four stages of two basic blocks (16, 32, 64, 128 channels), global average pool,
    1000 classes."""

    def __init__(self, classes=1000, widths=(16, 32, 64, 128)):
        super().__init__()
        self.stem = conv_bn_relu(3, widths[0], 7, 2, 3)
        self.pool = nn.MaxPool2d(3, 2, 1)
        blocks, cin = [], widths[0]
        for stage, w in enumerate(widths):
            for b in range(2):
                blocks.append(BasicBlock(cin, w, 2 if stage > 0 and b == 0 else 1))
                cin = w
        self.blocks = nn.Sequential(*blocks)
        self.fc = nn.Linear(cin, classes)

    def forward(self, x):
        x = self.blocks(self.pool(self.stem(x)))
        return self.fc(torch.flatten(F.adaptive_avg_pool2d(x, 1), 1))


# 6, 7. MobileNets --------------------------------------------------------------------------------------

def conv_bn_relu6(cin, cout, kernel, stride=1, groups=1):
    return nn.Sequential(nn.Conv2d(cin, cout, kernel, stride, kernel // 2, groups=groups, bias=False),
                         nn.BatchNorm2d(cout), nn.ReLU6(inplace=True))


class MobileNetV1(nn.Module):
    """MobileNet v1 (Howard et al. 2017) at width 0.25 on 3x128x128 (the mobilenet_v1_0.25_128 variant):
    a 3x3 stride-2 stem, thirteen depthwise 3x3 (stride 1 and 2) + pointwise 1x1 pairs with BN and ReLU6
    (exported as Clip), global average pool, 1000 classes."""

    # (output channels at width 1, stride of the depthwise conv)
    LAYERS = [(64, 1), (128, 2), (128, 1), (256, 2), (256, 1), (512, 2)] + [(512, 1)] * 5 + [(1024, 2), (1024, 1)]

    def __init__(self, classes=1000, width=0.25):
        super().__init__()
        cin = int(32 * width)
        layers = [conv_bn_relu6(3, cin, 3, 2)]
        for c, s in self.LAYERS:
            cout = int(c * width)
            layers += [conv_bn_relu6(cin, cin, 3, s, groups=cin), conv_bn_relu6(cin, cout, 1)]
            cin = cout
        self.features = nn.Sequential(*layers)
        self.fc = nn.Linear(cin, classes)

    def forward(self, x):
        return self.fc(torch.flatten(F.adaptive_avg_pool2d(self.features(x), 1), 1))


class InvertedResidual(nn.Module):
    """Expand 1x1 + ReLU6, depthwise 3x3 + ReLU6, project 1x1 without activation (the linear bottleneck);
    the input is added back when the shape is unchanged."""

    def __init__(self, cin, cout, stride, expand):
        super().__init__()
        mid = cin * expand
        layers = [] if expand == 1 else [conv_bn_relu6(cin, mid, 1)]
        layers += [conv_bn_relu6(mid, mid, 3, stride, groups=mid),
                   nn.Conv2d(mid, cout, 1, bias=False), nn.BatchNorm2d(cout)]
        self.body = nn.Sequential(*layers)
        self.residual = stride == 1 and cin == cout

    def forward(self, x):
        return x + self.body(x) if self.residual else self.body(x)


def round_channels(c, divisor=8):
    """MobileNet v2's rule: the nearest multiple of 8, never more than 10% below c."""
    rounded = max(divisor, int(c + divisor / 2) // divisor * divisor)
    return rounded + divisor if rounded < 0.9 * c else rounded


class MobileNetV2(nn.Module):
    """MobileNet v2 (Sandler et al. 2018) at width 0.35 on 3x96x96 (the mobilenet_v2_0.35_96 variant):
    seventeen inverted residual blocks with linear bottlenecks, a 1x1 conv to 1280, global average pool,
    100 classes."""

    # expansion t, channels c, repeats n, stride s (Table 2 of the paper)
    SETTINGS = [(1, 16, 1, 1), (6, 24, 2, 2), (6, 32, 3, 2), (6, 64, 4, 2), (6, 96, 3, 1), (6, 160, 3, 2),
                (6, 320, 1, 1)]

    def __init__(self, classes=100, width=0.35):
        super().__init__()
        cin = round_channels(32 * width)
        layers = [conv_bn_relu6(3, cin, 3, 2)]
        for t, c, n, s in self.SETTINGS:
            cout = round_channels(c * width)
            for i in range(n):
                layers.append(InvertedResidual(cin, cout, s if i == 0 else 1, t))
                cin = cout
        layers.append(conv_bn_relu6(cin, 1280, 1))
        self.features = nn.Sequential(*layers)
        self.fc = nn.Linear(1280, classes)

    def forward(self, x):
        return self.fc(torch.flatten(F.adaptive_avg_pool2d(self.features(x), 1), 1))


class SqueezeExcitation(nn.Module):
    """The squeeze-and-excitation gate (Hu et al. 2018) as MobileNet v3 writes it: global average pool, a 1x1
    conv to `squeeze` channels + ReLU, a 1x1 conv back + Hardsigmoid, the block's input scaled by the result
    (exported as GlobalAveragePool, Conv, Relu, Conv, HardSigmoid, Mul)."""

    def __init__(self, channels, squeeze):
        super().__init__()
        self.fc1 = nn.Conv2d(channels, squeeze, 1)
        self.fc2 = nn.Conv2d(squeeze, channels, 1)

    def forward(self, x):
        s = F.adaptive_avg_pool2d(x, 1)
        return x * F.hardsigmoid(self.fc2(F.relu(self.fc1(s))))


class MobileNetV3Block(nn.Module):
    """MobileNet v3's bottleneck: expand 1x1 (left out when the expansion equals the input), depthwise k x k,
    squeeze-and-excitation (some blocks), project 1x1 without activation; the input added back when the shape
    is unchanged. `hard`: Hardswish (exported as x * HardSigmoid(x) before opset 14), else ReLU."""

    def __init__(self, cin, kernel, expanded, cout, se, hard, stride):
        super().__init__()
        act = nn.Hardswish if hard else nn.ReLU
        layers = []
        if expanded != cin:
            layers += [nn.Conv2d(cin, expanded, 1, bias=False), nn.BatchNorm2d(expanded), act()]
        layers += [nn.Conv2d(expanded, expanded, kernel, stride, kernel // 2, groups=expanded, bias=False),
                   nn.BatchNorm2d(expanded), act()]
        if se:
            layers.append(SqueezeExcitation(expanded, round_channels(expanded // 4)))
        layers += [nn.Conv2d(expanded, cout, 1, bias=False), nn.BatchNorm2d(cout)]
        self.body = nn.Sequential(*layers)
        self.residual = stride == 1 and cin == cout

    def forward(self, x):
        return x + self.body(x) if self.residual else self.body(x)


class MobileNetV3Small(nn.Module):
    """MobileNet v3 Small (Howard et al. 2019, Table 2) at width 0.5 on 3x128x128: a 3x3 stride-2 stem with
    Hardswish, eleven bottlenecks (3x3 and 5x5 depthwise, nine with squeeze-and-excitation), a 1x1 conv, global
    average pool, a fully connected 512 + Hardswish, dropout, 100 classes."""

    # kernel, expanded channels, output channels, squeeze-excitation, Hardswish, stride (at width 1)
    SETTINGS = [(3, 16, 16, True, False, 2), (3, 72, 24, False, False, 2), (3, 88, 24, False, False, 1),
                (5, 96, 40, True, True, 2), (5, 240, 40, True, True, 1), (5, 240, 40, True, True, 1),
                (5, 120, 48, True, True, 1), (5, 144, 48, True, True, 1), (5, 288, 96, True, True, 2),
                (5, 576, 96, True, True, 1), (5, 576, 96, True, True, 1)]

    def __init__(self, classes=100, width=0.5):
        super().__init__()
        cin = round_channels(16 * width)
        layers = [nn.Conv2d(3, cin, 3, 2, 1, bias=False), nn.BatchNorm2d(cin), nn.Hardswish()]
        for k, e, c, se, hard, s in self.SETTINGS:
            expanded, cout = round_channels(e * width), round_channels(c * width)
            layers.append(MobileNetV3Block(cin, k, expanded, cout, se, hard, s))
            cin = cout
        last = 6 * cin
        layers += [nn.Conv2d(cin, last, 1, bias=False), nn.BatchNorm2d(last), nn.Hardswish()]
        self.features = nn.Sequential(*layers)
        self.classifier = nn.Sequential(nn.Linear(last, round_channels(1024 * width)), nn.Hardswish(),
                                        nn.Dropout(0.2), nn.Linear(round_channels(1024 * width), classes))

    def forward(self, x):
        return self.classifier(torch.flatten(F.adaptive_avg_pool2d(self.features(x), 1), 1))


class SqueezeExcitationSiLU(nn.Module):
    """EfficientNet's squeeze-and-excitation gate: global average pool, a 1x1 conv + SiLU, a 1x1 conv + Sigmoid,
    the input scaled (exported before opset 14 as GlobalAveragePool, Conv, x * Sigmoid(x), Conv, Sigmoid, Mul)."""

    def __init__(self, channels, squeeze):
        super().__init__()
        self.fc1 = nn.Conv2d(channels, squeeze, 1)
        self.fc2 = nn.Conv2d(squeeze, channels, 1)

    def forward(self, x):
        return x * torch.sigmoid(self.fc2(F.silu(self.fc1(F.adaptive_avg_pool2d(x, 1)))))


class MBConv(nn.Module):
    """EfficientNet's mobile inverted bottleneck: expand 1x1 + BN + SiLU (left out at expansion 1), depthwise
    k x k + BN + SiLU, squeeze-and-excitation to a quarter of the block's input channels, project 1x1 + BN; the
    input added back when the shape is unchanged."""

    def __init__(self, cin, cout, kernel, stride, expand):
        super().__init__()
        mid = cin * expand
        layers = [] if expand == 1 else [nn.Conv2d(cin, mid, 1, bias=False), nn.BatchNorm2d(mid), nn.SiLU()]
        layers += [nn.Conv2d(mid, mid, kernel, stride, kernel // 2, groups=mid, bias=False), nn.BatchNorm2d(mid),
                   nn.SiLU(), SqueezeExcitationSiLU(mid, max(1, cin // 4)),
                   nn.Conv2d(mid, cout, 1, bias=False), nn.BatchNorm2d(cout)]
        self.body = nn.Sequential(*layers)
        self.residual = stride == 1 and cin == cout

    def forward(self, x):
        return x + self.body(x) if self.residual else self.body(x)


class EfficientNetB0Small(nn.Module):
    """EfficientNet-B0 (Tan and Le 2019) scaled down to width 0.5 and depth 0.5 on 3x128x128: a 3x3 stride-2 stem,
    ten MBConv blocks (3x3 and 5x5 depthwise, each with squeeze-and-excitation), a 1x1 conv to 640, global
    average pool, dropout, 100 classes; SiLU throughout."""

    # expansion, kernel, stride, output channels, repeats (B0's stages at width and depth 1)
    STAGES = [(1, 3, 1, 16, 1), (6, 3, 2, 24, 2), (6, 5, 2, 40, 2), (6, 3, 2, 80, 3), (6, 5, 1, 112, 3),
              (6, 5, 2, 192, 4), (6, 3, 1, 320, 1)]

    def __init__(self, classes=100, width=0.5, depth=0.5):
        super().__init__()
        cin = round_channels(32 * width)
        layers = [nn.Conv2d(3, cin, 3, 2, 1, bias=False), nn.BatchNorm2d(cin), nn.SiLU()]
        for e, k, s, c, n in self.STAGES:
            cout = round_channels(c * width)
            for i in range(max(1, int(n * depth + 0.5))):
                layers.append(MBConv(cin, cout, k, s if i == 0 else 1, e))
                cin = cout
        head = round_channels(1280 * width)
        layers += [nn.Conv2d(cin, head, 1, bias=False), nn.BatchNorm2d(head), nn.SiLU()]
        self.features = nn.Sequential(*layers)
        self.classifier = nn.Sequential(nn.Dropout(0.2), nn.Linear(head, classes))

    def forward(self, x):
        return self.classifier(torch.flatten(F.adaptive_avg_pool2d(self.features(x), 1), 1))


# 8. ShuffleNet -----------------------------------------------------------------------------------------

def channel_shuffle(x, groups):
    """[N, g*k, H, W] -> [N, g, k, H, W] -> [N, k, g, H, W] -> [N, k*g, H, W]: exported as
    Reshape / Transpose (5-D) / Reshape."""
    n, c, h, w = x.shape
    return x.reshape(n, groups, c // groups, h, w).transpose(1, 2).reshape(n, c, h, w)


class ShuffleUnit(nn.Module):
    """ShuffleNet v1 unit: grouped 1x1 conv, channel shuffle, depthwise 3x3 conv (a 3x3 conv with one
    group per channel), grouped 1x1 conv; added to the input at stride 1, concatenated with a 3x3
    average pool of it at stride 2."""

    def __init__(self, cin, cout, groups, stride, group_first=True):
        super().__init__()
        self.stride, self.groups = stride, groups
        branch_out = cout - cin if stride == 2 else cout
        mid = cout // 4
        self.reduce = conv_bn_relu(cin, mid, 1, groups=groups if group_first else 1)
        self.depthwise = conv_bn_relu(mid, mid, 3, stride, 1, groups=mid, relu=False)
        self.expand = conv_bn_relu(mid, branch_out, 1, groups=groups, relu=False)

    def forward(self, x):
        y = self.expand(self.depthwise(channel_shuffle(self.reduce(x), self.groups)))
        if self.stride == 2:
            return F.relu(torch.cat([F.avg_pool2d(x, 3, 2, 1), y], 1))
        return F.relu(x + y)


class ShuffleNetV1(nn.Module):
    """ShuffleNet v1 (Zhang et al. 2017) with 3 groups at width 0.5 on 3x224x224: a 3x3 stride-2 conv of
    24, 3x3 stride-2 max pool, stages of 4, 8 and 4 shuffle units (120, 240, 480 channels), global
    average pool, 100 classes."""

    def __init__(self, classes=100, groups=3, widths=(120, 240, 480), repeats=(4, 8, 4)):
        super().__init__()
        self.stem = conv_bn_relu(3, 24, 3, 2, 1)
        self.pool = nn.MaxPool2d(3, 2, 1)
        units, cin = [], 24
        for stage, (w, n) in enumerate(zip(widths, repeats)):
            for i in range(n):
                units.append(ShuffleUnit(cin, w, groups, 2 if i == 0 else 1, group_first=not (stage == 0 and i == 0)))
                cin = w
        self.units = nn.Sequential(*units)
        self.fc = nn.Linear(cin, classes)

    def forward(self, x):
        x = self.units(self.pool(self.stem(x)))
        return self.fc(torch.flatten(F.adaptive_avg_pool2d(x, 1), 1))


# 9. SqueezeNet -----------------------------------------------------------------------------------------

class Fire(nn.Module):
    """Squeeze 1x1 + ReLU, then 1x1 and 3x3 expansions + ReLU concatenated."""

    def __init__(self, cin, squeeze, expand):
        super().__init__()
        self.squeeze = nn.Conv2d(cin, squeeze, 1)
        self.expand1 = nn.Conv2d(squeeze, expand, 1)
        self.expand3 = nn.Conv2d(squeeze, expand, 3, padding=1)

    def forward(self, x):
        s = F.relu(self.squeeze(x))
        return torch.cat([F.relu(self.expand1(s)), F.relu(self.expand3(s))], 1)


class SqueezeNet(nn.Module):
    """SqueezeNet 1.1 (Iandola et al. 2016) on 3x224x224: a 3x3 stride-2 conv of 64, eight fire modules
    between 3x3 stride-2 max pools (ceil mode), dropout, a 1x1 conv to 100 classes + ReLU, global average
    pool."""

    def __init__(self, classes=100):
        super().__init__()
        self.features = nn.Sequential(
            nn.Conv2d(3, 64, 3, 2), nn.ReLU(inplace=True), nn.MaxPool2d(3, 2, ceil_mode=True),
            Fire(64, 16, 64), Fire(128, 16, 64), nn.MaxPool2d(3, 2, ceil_mode=True),
            Fire(128, 32, 128), Fire(256, 32, 128), nn.MaxPool2d(3, 2, ceil_mode=True),
            Fire(256, 48, 192), Fire(384, 48, 192), Fire(384, 64, 256), Fire(512, 64, 256))
        self.classifier = nn.Sequential(nn.Dropout(0.5), nn.Conv2d(512, classes, 1), nn.ReLU(inplace=True))

    def forward(self, x):
        return torch.flatten(F.adaptive_avg_pool2d(self.classifier(self.features(x)), 1), 1)


# 10. DenseNet ------------------------------------------------------------------------------------------

class DenseLayer(nn.Module):
    """DenseNet-BC layer: BN-ReLU-1x1 conv (4k), BN-ReLU-3x3 conv (k); its k maps are concatenated to its
    input. BN comes before each conv, so only the second can fold into the 1x1 conv before it."""

    def __init__(self, cin, growth):
        super().__init__()
        self.bn1, self.conv1 = nn.BatchNorm2d(cin), nn.Conv2d(cin, 4 * growth, 1, bias=False)
        self.bn2, self.conv2 = nn.BatchNorm2d(4 * growth), nn.Conv2d(4 * growth, growth, 3, padding=1, bias=False)

    def forward(self, x):
        y = self.conv1(F.relu(self.bn1(x)))
        y = self.conv2(F.relu(self.bn2(y)))
        return torch.cat([x, y], 1)


class DenseNetBC(nn.Module):
    """DenseNet-BC (Huang et al. 2017) with growth 12 and depth 40 on 3x32x32 (CIFAR): a 3x3 conv of 24,
    three dense blocks of six layers (each a Concat onto the running stack) with transitions (BN-ReLU-1x1
    conv halving the channels, 2x2 average pool) between them, BN-ReLU, global average pool, 10 classes."""

    def __init__(self, classes=10, growth=12, layers_per_block=6):
        super().__init__()
        c = 2 * growth
        self.stem = nn.Conv2d(3, c, 3, padding=1, bias=False)
        stages = []
        for block in range(3):
            for _ in range(layers_per_block):
                stages.append(DenseLayer(c, growth))
                c += growth
            if block < 2:
                stages += [nn.BatchNorm2d(c), nn.ReLU(inplace=True), nn.Conv2d(c, c // 2, 1, bias=False),
                           nn.AvgPool2d(2)]
                c //= 2
        stages += [nn.BatchNorm2d(c), nn.ReLU(inplace=True)]
        self.features = nn.Sequential(*stages)
        self.fc = nn.Linear(c, classes)

    def forward(self, x):
        return self.fc(torch.flatten(F.adaptive_avg_pool2d(self.features(self.stem(x)), 1), 1))


# 11. 1-D CNN -------------------------------------------------------------------------------------------

class TimeSeriesCnn(nn.Module):
    """A 1-D CNN for sensor time series on 9 channels x 128 steps (the UCI HAR layout: body and total
    acceleration and gyroscope, x/y/z, 2.56 s at 50 Hz): three Conv1d + BN + ReLU with MaxPool1d, global
    average pool, 6 activities."""

    def __init__(self, classes=6):
        super().__init__()
        self.features = nn.Sequential(
            nn.Conv1d(9, 32, 7, padding=3, bias=False), nn.BatchNorm1d(32), nn.ReLU(inplace=True), nn.MaxPool1d(2),
            nn.Conv1d(32, 64, 5, padding=2, bias=False), nn.BatchNorm1d(64), nn.ReLU(inplace=True), nn.MaxPool1d(2),
            nn.Conv1d(64, 128, 3, padding=1, bias=False), nn.BatchNorm1d(128), nn.ReLU(inplace=True))
        self.fc = nn.Linear(128, classes)

    def forward(self, x):
        return self.fc(torch.flatten(F.adaptive_avg_pool1d(self.features(x), 1), 1))


# 12-15. Image to image ---------------------------------------------------------------------------------

class DnCNN(nn.Module):
    """DnCNN-S (Zhang et al. 2017): 17 layers of 3x3 convolutions with 64 channels (conv + ReLU, 15 x
    conv + BN + ReLU, conv) estimate the noise; the output is the input minus it. Any height and width."""

    def __init__(self, depth=17, width=64):
        super().__init__()
        layers = [nn.Conv2d(1, width, 3, padding=1), nn.ReLU(inplace=True)]
        for _ in range(depth - 2):
            layers += [nn.Conv2d(width, width, 3, padding=1, bias=False), nn.BatchNorm2d(width), nn.ReLU(inplace=True)]
        layers.append(nn.Conv2d(width, 1, 3, padding=1))
        self.body = nn.Sequential(*layers)

    def forward(self, x):
        return x - self.body(x)


class Espcn(nn.Module):
    """ESPCN (Shi et al. 2016) for 3x super-resolution of the luminance (Y) channel: 5x5 conv of 64 + Tanh,
    3x3 conv of 32 + Tanh, 3x3 conv to 9 = 3^2 channels, a pixel shuffle (exported as DepthToSpace, CRD)
    to 3H x 3W. Any height and width."""

    def __init__(self, scale=3):
        super().__init__()
        self.conv1 = nn.Conv2d(1, 64, 5, padding=2)
        self.conv2 = nn.Conv2d(64, 32, 3, padding=1)
        self.conv3 = nn.Conv2d(32, scale * scale, 3, padding=1)
        self.shuffle = nn.PixelShuffle(scale)

    def forward(self, x):
        return self.shuffle(self.conv3(torch.tanh(self.conv2(torch.tanh(self.conv1(x))))))


def double_conv(cin, cout):
    return nn.Sequential(conv_bn_relu(cin, cout, 3, 1, 1), conv_bn_relu(cout, cout, 3, 1, 1))


class UNetSmall(nn.Module):
    """A small U-Net (Ronneberger et al. 2015) for a grayscale segmentation mask: three levels of two 3x3
    conv + BN + ReLU and a 2x2 max pool (16, 32, 64 channels), a bottleneck of 128, and on the way up a
    2x2 stride-2 ConvTranspose, Concat with the skip, two 3x3 convs; a 1x1 conv and a Sigmoid. Height and
    width: multiples of 8."""

    def __init__(self, widths=(16, 32, 64, 128)):
        super().__init__()
        self.down = nn.ModuleList()
        cin = 1
        for w in widths[:-1]:
            self.down.append(double_conv(cin, w))
            cin = w
        self.bottleneck = double_conv(cin, widths[-1])
        self.up, self.decode = nn.ModuleList(), nn.ModuleList()
        cin = widths[-1]
        for w in reversed(widths[:-1]):
            self.up.append(nn.ConvTranspose2d(cin, w, 2, stride=2))
            self.decode.append(double_conv(2 * w, w))
            cin = w
        self.head = nn.Conv2d(cin, 1, 1)

    def forward(self, x):
        skips = []
        for block in self.down:
            x = block(x)
            skips.append(x)
            x = F.max_pool2d(x, 2)
        x = self.bottleneck(x)
        for up, decode, skip in zip(self.up, self.decode, reversed(skips)):
            x = decode(torch.cat([skip, up(x)], 1))
        return torch.sigmoid(self.head(x))


class ConvAutoencoder(nn.Module):
    """A convolutional autoencoder: three 3x3 conv + ReLU + 2x2 max pool stages down (16, 32, 64
    channels), three 2x upsamplings (Resize: nearest, bilinear, nearest) each followed by a 3x3 conv on the
    way up, a Sigmoid. Height and width: multiples of 8."""

    def __init__(self, widths=(16, 32, 64)):
        super().__init__()
        self.enc = nn.ModuleList()
        cin = 1
        for w in widths:
            self.enc.append(nn.Conv2d(cin, w, 3, padding=1))
            cin = w
        self.dec = nn.ModuleList()
        for w in list(reversed(widths[:-1])) + [1]:
            self.dec.append(nn.Conv2d(cin, w, 3, padding=1))
            cin = w
        self.modes = ("nearest", "bilinear", "nearest")

    def forward(self, x):
        for conv in self.enc:
            x = F.max_pool2d(F.relu(conv(x)), 2)
        for i, (conv, mode) in enumerate(zip(self.dec, self.modes)):
            if mode == "bilinear":
                x = F.interpolate(x, scale_factor=2.0, mode="bilinear", align_corners=False)
            else:
                x = F.interpolate(x, scale_factor=2.0, mode="nearest")
            x = conv(x)
            x = torch.sigmoid(x) if i == len(self.dec) - 1 else F.relu(x)
        return x


# The zoo ------------------------------------------------------------------------------------------------

# Tolerance of the zoo's test data (`cnnrt run --rtol 1e-4 --atol 1e-4`): |ours - exact| <= ATOL + RTOL * |exact|
# per element, against the float64 answer; outputs are of order 1 (make_zoo.py scales the last layer).
RTOL = 1e-4
ATOL = 1e-4

class ZooModel:
    """One zoo entry. `test_shape`: the input of the committed test data (batch included). `image_to_image`:
    height and width are dynamic; the benchmark runs it at fixed image sizes rather than at batch sizes.
    `input_kind`: "normal" (standard normal, a normalised input) or "image" (uniform in [0, 1]).
    `last_layer_std`: the standard deviation make_zoo.py gives the last layer's output (DnCNN's is the noise
    it subtracts, 0.1 as for noise of sigma 25/255)."""

    def __init__(self, name, factory, input_name, output_name, test_shape, opset, image_to_image=False,
                 input_kind="normal", last_layer_std=1.0, summary=""):
        self.name, self.factory = name, factory
        self.input_name, self.output_name = input_name, output_name
        self.test_shape, self.opset = tuple(test_shape), opset
        self.image_to_image, self.input_kind, self.summary = image_to_image, input_kind, summary
        self.last_layer_std = last_layer_std

    def build(self):
        """The module with PyTorch's default initialisation, in eval mode (weights are loaded or set after)."""
        return self.factory().eval()

    def input_shape(self, batch):
        """The input for a batch size (classifiers) with the test data's sample size."""
        return (batch,) + self.test_shape[1:]


ZOO = [
    ZooModel("lenet5", LeNet5, "image", "logits", (2, 1, 32, 32), 11,
             summary="LeNet-5: Tanh, average pools, three fully connected layers"),
    ZooModel("kws_cnn", KwsCnn, "mfcc", "logits", (2, 1, 49, 10), 13,
             summary="keyword spotting on MFCC: 10x4 filters, stride 2x1"),
    ZooModel("vgg_small", VggSmall, "image", "logits", (2, 1, 64, 64), 17,
             summary="VGG-style 3x3 stacks, max pools, dropout"),
    ZooModel("resnet20", ResNet20, "image", "logits", (2, 3, 32, 32), 11,
             summary="ResNet-20 for CIFAR: BN, stride-2 blocks with 1x1 projection shortcuts"),
    ZooModel("resnet18_narrow", ResNet18Narrow, "image", "logits", (1, 3, 224, 224), 13,
             summary="ResNet-18 at 1/4 width: 7x7 stride-2 stem, 3x3 stride-2 max pool"),
    ZooModel("mobilenet_v1", MobileNetV1, "image", "logits", (2, 3, 128, 128), 17,
             summary="MobileNet v1 0.25: depthwise stride 1 and 2, ReLU6 as Clip"),
    ZooModel("mobilenet_v2", MobileNetV2, "image", "logits", (2, 3, 96, 96), 11,
             summary="MobileNet v2 0.35: inverted residuals, linear bottlenecks"),
    ZooModel("mobilenet_v3_small", MobileNetV3Small, "image", "logits", (2, 3, 128, 128), 13,
             summary="MobileNet v3 Small 0.5: squeeze-and-excitation gates, Hardswish as x * HardSigmoid(x)"),
    ZooModel("efficientnet_b0_small", EfficientNetB0Small, "image", "logits", (2, 3, 128, 128), 13,
             summary="EfficientNet-B0 at half width and depth: MBConv, SiLU as x * Sigmoid(x), Sigmoid gates"),
    ZooModel("shufflenet_v1", ShuffleNetV1, "image", "logits", (1, 3, 224, 224), 13,
             summary="ShuffleNet v1 g3 0.5x: grouped 1x1, depthwise 3x3, channel shuffle (5-D Transpose)"),
    ZooModel("squeezenet", SqueezeNet, "image", "logits", (1, 3, 224, 224), 17,
             summary="SqueezeNet 1.1: fire modules (Concat), ceil-mode max pools"),
    ZooModel("densenet_bc", DenseNetBC, "image", "logits", (2, 3, 32, 32), 11,
             summary="DenseNet-BC k=12 depth 40: Concat chains, BN before conv, transition average pools"),
    ZooModel("ts_cnn1d", TimeSeriesCnn, "series", "logits", (2, 9, 128), 13,
             summary="1-D CNN for time series: Conv1d, MaxPool1d"),
    ZooModel("dncnn", DnCNN, "image", "denoised", (1, 1, 40, 48), 17, image_to_image=True, input_kind="image",
             last_layer_std=0.1,
             summary="DnCNN denoiser: 17 3x3 convs with BN, residual Sub; any HxW"),
    ZooModel("espcn", Espcn, "image", "upscaled", (1, 1, 24, 32), 11, image_to_image=True, input_kind="image",
             summary="ESPCN 3x super-resolution of Y: Tanh, PixelShuffle as DepthToSpace; any HxW"),
    ZooModel("unet_small", UNetSmall, "image", "mask", (1, 1, 48, 64), 13, image_to_image=True, input_kind="image",
             summary="U-Net: ConvTranspose 2x2 stride 2, skip Concat, Sigmoid mask; HxW multiples of 8"),
    ZooModel("conv_autoencoder", ConvAutoencoder, "image", "reconstruction", (1, 1, 48, 64), 17,
             image_to_image=True, input_kind="image",
             summary="autoencoder: max pools down, Resize (nearest, bilinear) up; HxW multiples of 8"),
]

BY_NAME = {m.name: m for m in ZOO}


def state_dict_from_onnx(model_proto):
    """Name -> numpy array of the model's initializers, with the names the TorchScript exporter gives
    them (the module's state_dict keys). The exporter writes a tensor equal to another once and an
    Identity node for the second name; those names are resolved too."""
    from onnx import numpy_helper

    tensors = {t.name: numpy_helper.to_array(t) for t in model_proto.graph.initializer}
    for node in model_proto.graph.node:
        if node.op_type == "Identity" and node.input[0] in tensors:
            tensors[node.output[0]] = tensors[node.input[0]]
    return tensors


def load_onnx_weights(module, model_proto):
    """Copies every parameter and buffer of `module` (but BN's num_batches_tracked) from the ONNX model's
    initializers, by name. Raises ValueError naming what is missing or shaped differently: the benchmark
    must time PyTorch on exactly the weights cnnrt runs."""
    tensors = state_dict_from_onnx(model_proto)
    state = module.state_dict()
    missing, wrong = [], []
    for key, value in state.items():
        if key.endswith("num_batches_tracked"):
            continue
        if key not in tensors:
            missing.append(key)
        elif tuple(tensors[key].shape) != tuple(value.shape):
            wrong.append(f"{key} {tuple(tensors[key].shape)} vs {tuple(value.shape)}")
        else:
            state[key] = torch.from_numpy(tensors[key].copy()).to(value.dtype)
    if missing or wrong:
        raise ValueError("ONNX initializers do not match the module: " +
                         "; ".join([f"missing {', '.join(missing)}"] * bool(missing) + wrong))
    module.load_state_dict(state)
    return module
