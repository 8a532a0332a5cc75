// Generated from VERSION by `make version` (the Makefile checks it before each build);
// kept in the tree so that a plain `swift build` works. Edit VERSION, not this file.
let stillmomentVersion = "1.0.0"
