package io.gpusched.core;

/** Receives a device's health changes from an inventory. */
@FunctionalInterface
public interface GpuHealthListener {
    /**
     * @param device the device whose health changed
     * @param health its new health
     */
    void onHealthChange(GpuDevice device, GpuHealth health);
}
