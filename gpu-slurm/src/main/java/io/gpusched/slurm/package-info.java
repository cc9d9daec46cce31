/**
 * Slurm GRES from a gpusched inventory. Start at {@link io.gpusched.slurm.SlurmGres}: {@code gres.conf} lines, the
 * node's {@code Gres=}, and {@link io.gpusched.slurm.SlurmGres#check} of an existing file read by
 * {@link io.gpusched.slurm.GresConfParser}.
 */
package io.gpusched.slurm;
