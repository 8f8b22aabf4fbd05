# TensorFlow peer, the seed's pattern (see tf_common.py): MLP 784-512-256-10 on Fashion-MNIST, SGD 0.05,
# as torch_mlp.py. WORKERS > 1 is the seed's Hogwild!: WORKERS Python threads sharing the session and the
# variables, each looping sess.run(train_op), STEPS in total (inter-op threads = WORKERS).
# Usage: python tf_mlp.py STEPS BATCH INTRA_OP_THREADS [WORKERS]
import sys
import tf_common as C
from tf_common import tf

steps, batch, intra = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3])
workers = int(sys.argv[4]) if len(sys.argv) > 4 else 1
x, y = C.train_batches(batch)


def dense(x, units, name, act=None):
    with tf.variable_scope(name):
        w = tf.get_variable("w", [x.shape[1], units], initializer=tf.glorot_uniform_initializer())
        b = tf.get_variable("b", [units], initializer=tf.zeros_initializer())
        h = tf.matmul(x, w) + b
        return act(h) if act else h


def net(x):
    with tf.variable_scope("model", reuse=tf.AUTO_REUSE):
        return dense(dense(dense(x, 512, "fc1", tf.nn.relu), 256, "fc2", tf.nn.relu), 10, "out")


loss = tf.reduce_mean(tf.nn.sparse_softmax_cross_entropy_with_logits(labels=y, logits=net(x)))
train_op = tf.train.GradientDescentOptimizer(0.05).minimize(loss)
Xt, Yt = C.test_set()
xt, yt = tf.placeholder(tf.float32, Xt.shape), tf.placeholder(tf.int32, Yt.shape)
acc = tf.reduce_mean(tf.cast(tf.equal(tf.argmax(net(xt), 1, output_type=tf.int32), yt), tf.float32))
sess = C.session(intra, max(1, workers))
n, dt = C.run_threads(sess, train_op, steps, workers, warmup=20)
flops = n * batch * 6 * (784 * 512 + 512 * 256 + 256 * 10)
print(f"tensorflow {tf.__version__} mlp steps={n} batch={batch} intra={intra} workers={workers} time={dt:.3f}s "
      f"steps/s={n / dt:.1f} GFLOP/s={flops / dt / 1e9:.1f} test_acc={sess.run(acc, {xt: Xt, yt: Yt}):.4f}")
