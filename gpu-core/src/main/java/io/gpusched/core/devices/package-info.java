/**
 * The device nodes ({@code /dev/nvidia*}, {@code /dev/kfd}, {@code /dev/dri/renderD*}) an allocation needs, with their
 * majors and minors, for isolators and container runtimes. Start with {@link io.gpusched.core.devices.GpuDeviceNodes}.
 */
package io.gpusched.core.devices;
