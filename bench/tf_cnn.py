# TensorFlow peer, the seed's pattern (see tf_common.py): the LeNet-style CNN of torch_cnn.py on Fashion-MNIST
# (conv5x5x32-pool-conv5x5x64-pool-fc1024-fc10, 'same' padding, NHWC), SGD 0.05, one training loop whose
# ops use THREADS intra-op threads (and INTER inter-op threads, default 1).
# Usage: python tf_cnn.py STEPS BATCH THREADS [INTER]
import sys
import tf_common as C
from tf_common import tf

steps, batch, threads = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3])
inter = int(sys.argv[4]) if len(sys.argv) > 4 else 1
x, y = C.train_batches(batch, (28, 28, 1))
glorot, zeros = tf.glorot_uniform_initializer(), tf.zeros_initializer()


def conv_pool(x, k, name):
    with tf.variable_scope(name):
        w = tf.get_variable("w", [5, 5, x.shape[3], k], initializer=glorot)
        b = tf.get_variable("b", [k], initializer=zeros)
        h = tf.nn.relu(tf.nn.conv2d(x, w, strides=1, padding="SAME") + b)
        return tf.nn.max_pool2d(h, 2, 2, "VALID")


def dense(x, units, name, act=None):
    with tf.variable_scope(name):
        w = tf.get_variable("w", [x.shape[1], units], initializer=glorot)
        b = tf.get_variable("b", [units], initializer=zeros)
        h = tf.matmul(x, w) + b
        return act(h) if act else h


with tf.variable_scope("model"):
    h = conv_pool(conv_pool(x, 32, "conv1"), 64, "conv2")
    logits = dense(dense(tf.reshape(h, [-1, 7 * 7 * 64]), 1024, "fc1", tf.nn.relu), 10, "out")
loss = tf.reduce_mean(tf.nn.sparse_softmax_cross_entropy_with_logits(labels=y, logits=logits))
train_op = tf.train.GradientDescentOptimizer(0.05).minimize(loss)
sess = C.session(threads, inter)
n, dt = C.run_threads(sess, train_op, steps, 1, warmup=5)
print(f"tensorflow {tf.__version__} cnn steps={n} batch={batch} threads={threads} inter={inter} time={dt:.3f}s "
      f"steps/s={n / dt:.1f} loss={sess.run(loss):.3f}")
