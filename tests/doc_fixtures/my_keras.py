"""docs/keras.md's my_keras.py:build: a small Keras CNN on 32x32x3 images, 10 classes, output pinned to float32."""

import keras
from keras import layers


def build():
    inputs = keras.Input((32, 32, 3))
    x = layers.Conv2D(16, 3, activation="relu")(inputs)
    x = layers.GlobalAveragePooling2D()(x)
    x = layers.Dense(10)(x)
    outputs = layers.Activation("softmax", dtype="float32")(x)
    return keras.Model(inputs, outputs)
