package io.gpusched.kubernetes;

/**
 * A kubelet request the plug-in cannot serve as asked (unknown ids, a size outside the set, must-include ids that are
 * not available): answered with gRPC {@code INVALID_ARGUMENT} and this message, never a crash.
 */
public class InvalidDeviceRequestException extends IllegalArgumentException {
    private static final long serialVersionUID = 1L;

    /** @param message what was wrong and what would be valid */
    public InvalidDeviceRequestException(String message) {
        super(message);
    }

    /**
     * @return an id as it may appear in a message: quoted, cut to 80 characters (a gRPC status travels in HTTP/2
     *         trailers; a 10,000-character id echoed there turns the answer into INTERNAL)
     */
    static String quote(String id) {
        return "\"" + (id.length() <= 80 ? id : id.substring(0, 80) + "...(" + id.length() + " characters)") + "\"";
    }
}
