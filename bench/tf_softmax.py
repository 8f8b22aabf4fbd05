# TensorFlow peer, the seed's pattern (see tf_common.py): softmax regression 784->10 on Fashion-MNIST,
# zero-initialised, SGD 0.1, 1 thread (intra-op 1, inter-op 1), the overhead-bound workload of torch_small.py.
# Usage: python tf_softmax.py STEPS BATCH      (prints us/step and steps/s of the timed loop)
import sys
import tf_common as C
from tf_common import tf

steps, batch = int(sys.argv[1]), int(sys.argv[2])
x, y = C.train_batches(batch)
with tf.variable_scope("model"):
    w = tf.get_variable("w", [784, 10], initializer=tf.zeros_initializer())
    b = tf.get_variable("b", [10], initializer=tf.zeros_initializer())
loss = tf.reduce_mean(tf.nn.sparse_softmax_cross_entropy_with_logits(labels=y, logits=tf.matmul(x, w) + b))
train_op = tf.train.GradientDescentOptimizer(0.1).minimize(loss)
sess = C.session(1, 1)
n, dt = C.run_threads(sess, train_op, steps, 1, warmup=500)
print(f"tensorflow {tf.__version__} softmax-regression steps={n} batch={batch} time={dt:.3f}s "
      f"steps/s={n / dt:.0f} us/step={dt / n * 1e6:.1f} loss={sess.run(loss):.3f}")
