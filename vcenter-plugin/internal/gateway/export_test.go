package gateway

// JobPoll lets tests follow jobs faster.
var JobPoll = &jobPoll
