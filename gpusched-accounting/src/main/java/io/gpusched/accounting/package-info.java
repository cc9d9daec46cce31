/**
 * What each allocation used: per-allocation GPU accounting (issue 34). Start at {@link
 * io.gpusched.accounting.AccountingSampler} (the node's sampler: sweeps in, intervals and idle steps out), then
 * {@link io.gpusched.accounting.AccountingStore} (the store on the node and its format, {@link
 * io.gpusched.accounting.RecordCodec}), {@link io.gpusched.accounting.UsageReport} and {@link
 * io.gpusched.accounting.AllocationUsage} (reports), {@link io.gpusched.accounting.IdlePolicy} and {@link
 * io.gpusched.accounting.IdleWatch} (idle allocations warned, then reclaimed). docs/ACCOUNTING.md describes the model,
 * the store's format and the bounds of every figure.
 */
package io.gpusched.accounting;
