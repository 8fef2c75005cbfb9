/* Training the tiny model on a small repetitive text for 30 steps brings the loss well
 * below its start (ln 256 for a fresh byte-level model): the mean of the last five steps
 * is under half the first step's, with seeded shuffling and activation checkpointing. */
#include "train_fixture.h"

int main(void)
{
	struct tf_dir d;
	struct zinf_train_opts o;
	struct zinf_train_result res;
	struct tf_losses l;
	double tail = 0;

	tf_setup(&d, NULL);
	tf_write_ds(&d, "cpu", "cpu", false);
	tf_opts(&d, &o, 30, &l);
	o.shuffle = true;
	o.activation_checkpointing = true;
	tf_run(&o, &res);
	T_CHECK(l.n == 30, "%d steps reported", l.n);
	for (int i = 25; i < 30; i++)
		tail += l.loss[i] / 5;
	T_CHECK(tail < 0.5 * l.loss[0], "loss %.4f -> %.4f (mean of the last 5): not falling",
		l.loss[0], tail);
	T_CHECK(res.first_loss == l.loss[0] && res.last_loss == l.loss[29], "result losses");
	T_CHECK(res.tokens == 30ull * 2 * 2 * 16, "tokens %llu", (unsigned long long)res.tokens);
	tf_cleanup(&d);
	return T_EXIT_PASS;
}
