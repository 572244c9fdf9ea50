"""Keras model factories the tests give to ``--model`` (the file imports keras: detected as a Keras model)."""

import keras
from keras import layers


def mlp():
    """A classifier whose output is pinned to float32, as Keras's mixed precision guide says."""
    inputs = keras.Input((20,))
    x = layers.Dense(32, activation="relu")(inputs)
    x = layers.Dense(2)(x)
    outputs = layers.Activation("softmax", dtype="float32")(x)
    return keras.Model(inputs, outputs)


def half_output():
    """The output layer left in the policy's compute dtype (float16 under mixed_float16): warned about."""
    inputs = keras.Input((20,))
    return keras.Model(inputs, layers.Dense(2)(layers.Dense(16, activation="relu")(inputs)))


def not_a_model():
    return [1, 2, 3]


def overflow():
    """A first layer whose outputs pass float16's 65504: under mixed_float16 the loss is inf/NaN from step 1."""
    inputs = keras.Input((20,))
    x = layers.Dense(16, kernel_initializer=keras.initializers.Constant(1e4))(inputs)
    x = layers.Dense(2)(x)
    return keras.Model(inputs, layers.Activation("softmax", dtype="float32")(x))


def compiled():
    """A factory that compiles its model itself (its optimizer and loss are kept)."""
    model = mlp()
    model.compile(optimizer=keras.optimizers.SGD(0.01), loss="sparse_categorical_crossentropy", metrics=["accuracy"])
    return model


def make_batch(batch_size, rng):
    """--batches for a Keras model: numpy (inputs, targets) from a numpy Generator; the class is the sign of x[0]."""
    x = rng.standard_normal((batch_size, 20)).astype("float32")
    return x, (x[:, 0] > 0).astype("int64")


def make_three(batch_size, rng):
    return 1, 2, 3


def two_inputs():
    """Two inputs by name (features and extra features), one float32 softmax output."""
    a, b = keras.Input((8,), name="feats"), keras.Input((4,), name="extra")
    x = layers.Concatenate()([layers.Dense(16, activation="relu")(a), layers.Dense(8, activation="relu")(b)])
    return keras.Model([a, b], layers.Activation("softmax", dtype="float32")(layers.Dense(2)(x)))


def _pair(batch_size, rng):
    a = rng.standard_normal((batch_size, 8)).astype("float32")
    b = rng.standard_normal((batch_size, 4)).astype("float32")
    return a, b, ((a[:, 0] + b[:, 0]) > 0).astype("int64")


def make_tuple(batch_size, rng):
    a, b, y = _pair(batch_size, rng)
    return (a, b), y


def make_list(batch_size, rng):
    a, b, y = _pair(batch_size, rng)
    return [a, b], y


def make_dict(batch_size, rng):
    a, b, y = _pair(batch_size, rng)
    return {"feats": a, "extra": b}, y


def two_outputs():
    """Two inputs, two named outputs (a class and a value), compiled with a loss per output."""
    a, b = keras.Input((8,), name="feats"), keras.Input((4,), name="extra")
    x = layers.Concatenate()([layers.Dense(16, activation="relu")(a), layers.Dense(8, activation="relu")(b)])
    cls = layers.Activation("softmax", dtype="float32", name="cls")(layers.Dense(2)(x))
    val = layers.Dense(1, dtype="float32", name="val")(x)
    model = keras.Model([a, b], {"cls": cls, "val": val})
    model.compile(optimizer=keras.optimizers.Adam(1e-3), loss={"cls": "sparse_categorical_crossentropy", "val": "mse"})
    return model


def make_two_targets(batch_size, rng):
    a, b, y = _pair(batch_size, rng)
    return (a, b), {"cls": y, "val": a[:, :1] - b[:, :1]}


def two_regressions():
    """Two outputs of one kind, uncompiled: one --loss (mean squared error) applies to both."""
    inputs = keras.Input((8,))
    x = layers.Dense(16, activation="relu")(inputs)
    return keras.Model(inputs, [layers.Dense(2, dtype="float32")(x), layers.Dense(1, dtype="float32")(x)])


def make_two_values(batch_size, rng):
    x = rng.standard_normal((batch_size, 8)).astype("float32")
    return x, [x[:, :2] * 0.5, x[:, 2:3]]


def mse(y_true, y_pred):
    return keras.ops.mean(keras.ops.square(y_true - y_pred))


def ragged(batch_size, rng):
    return (rng.standard_normal((batch_size, 8)), rng.standard_normal((batch_size + 1, 4))), rng.integers(0, 2, batch_size)


def table():
    """A classifier of 3 features a row (a CSV's, by --data-dir)."""
    inputs = keras.Input((3,))
    x = layers.Dense(16, activation="relu")(inputs)
    outputs = layers.Activation("softmax", dtype="float32")(layers.Dense(2)(x))
    return keras.Model(inputs, outputs)


def small_conv():
    """A convnet of 12x12 RGB images, channels-last as Keras takes them (class folders, by --data-dir)."""
    inputs = keras.Input((12, 12, 3))
    x = layers.GlobalAveragePooling2D()(layers.Conv2D(4, 3, activation="relu")(inputs))
    outputs = layers.Activation("softmax", dtype="float32")(layers.Dense(3)(x))
    return keras.Model(inputs, outputs)
