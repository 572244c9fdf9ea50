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
