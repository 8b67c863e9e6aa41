// Imported first by a bench that runs the app in its own process: the app's logger reads LOG_LEVEL when its
// module loads, before the bench's own code could set it.
process.env.LOG_LEVEL ??= "error"
