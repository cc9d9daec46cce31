package io.gpusched.benchmarks.internal;

import com.sun.jna.Native;
import com.sun.jna.NativeLibrary;
import com.sun.jna.Platform;

/** libc, direct-mapped through JNA: the polling benchmark's baseline native call, in every mode. */
public final class Libc {
    static {
        Native.register(NativeLibrary.getInstance(Platform.C_LIBRARY_NAME));
    }

    private Libc() {
    }

    /** @param v a value @return its absolute value, computed by libc */
    public static native long labs(long v);
}
