package io.gpusched.cuda;

import io.gpusched.core.GpuException;

/** No installation satisfies the requirement on this driver; the message lists each candidate and its verdict. */
public class CudaResolutionException extends GpuException {
    /** @param message what was asked, what was found, and what to do */
    public CudaResolutionException(String message) {
        super(message);
    }
}
