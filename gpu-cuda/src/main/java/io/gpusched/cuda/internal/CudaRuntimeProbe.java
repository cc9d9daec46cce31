package io.gpusched.cuda.internal;

import com.sun.jna.Function;
import com.sun.jna.NativeLibrary;
import com.sun.jna.ptr.IntByReference;
import java.nio.file.Path;
import java.util.OptionalInt;

/**
 * Asks an installation's {@code libcudart} for {@code cudaRuntimeGetVersion}. That call needs no GPU and creates no
 * CUDA context; nothing else of the runtime is called in the host JVM. Internal.
 */
public final class CudaRuntimeProbe {
    private CudaRuntimeProbe() {
    }

    /** @return the runtime's version integer (13000 for 13.0), or empty when it cannot be loaded or answers an error */
    public static OptionalInt runtimeVersion(Path libcudart) {
        if (Boolean.getBoolean("gpusched.native.disable")) {
            return OptionalInt.empty();
        }
        try {
            NativeLibrary lib = NativeLibrary.getInstance(libcudart.toAbsolutePath().toString());
            Function f = lib.getFunction("cudaRuntimeGetVersion");
            IntByReference out = new IntByReference();
            int rc = f.invokeInt(new Object[]{out});
            return rc == 0 && out.getValue() > 0 ? OptionalInt.of(out.getValue()) : OptionalInt.empty();
        } catch (UnsatisfiedLinkError | RuntimeException e) {
            return OptionalInt.empty();
        }
    }
}
