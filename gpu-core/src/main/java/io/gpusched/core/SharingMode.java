package io.gpusched.core;

/** Whether an allocation owns its GPUs or shares them with other allocations. */
public enum SharingMode {
    /** The allocation's GPUs are its alone. */
    EXCLUSIVE,
    /** The allocation reserves an amount of memory on each GPU; others may reserve the rest. */
    SHARED
}
