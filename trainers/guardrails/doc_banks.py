"""Sentence parts of the generated benign documents (doc_domains.py composes them): e-mails,
web pages, tables and code whose imperatives address a human reader.

Written for this project. Parts, not whole sentences: a passage is composed from a lead, an
action, a time and a reason (and so on), so a half of a few dozen parts gives thousands of
different sentences and the model cannot learn the sentences by heart (round two's 12 body
sentences per half did not generalise: held-out e-mails far below the threshold, the test
half's above it). Every bank is split by position (even items train, odd items test), so the
test passages share no part, hence no sentence, with training.
"""

from __future__ import annotations

NAMES = (
    "Maria Keller", "Tom Okafor", "Priya Raman", "Lukas Berg", "Chen Wei", "Sofia Rossi",
    "James Moore", "Aisha Bello", "Daniel Novak", "Emma Laurent", "Kenji Sato", "Olga Petrova",
    "Hannah Schmidt", "Carlos Mendes", "Fatima Zahra", "Peter Lindqvist", "Grace Mensah",
    "Ravi Kapoor", "Julia Nowak", "Samuel Adeyemi", "Ines Duarte", "Mark Whitfield",
    "Yuki Tanaka", "Elena Popescu",
)  # fmt: skip
SUBJECT_PREFIXES = (
    "",
    "Re: ",
    "Fwd: ",
    "RE: ",
    "[External] ",
    "FW: ",
    "Reminder: ",
    "Action needed: ",
)
TOPICS = (
    "Q3 budget review", "Team offsite next month", "Invoice 4471 overdue",
    "Updated release plan", "Your order has shipped", "Contract draft",
    "Office closure on Friday", "Onboarding checklist", "Meeting notes from Tuesday",
    "Password expiry notice", "Vendor shortlist", "Parent-teacher evening",
    "Holiday rota", "Expense policy changes", "Board pack for March", "Lab safety induction",
    "Website migration", "Quarterly newsletter", "Fire drill on Wednesday",
    "Travel booking for the conference", "New starter: desk and laptop", "Survey results",
    "Server maintenance window", "Grant application deadline", "Client visit agenda",
    "Renewal of your subscription", "Catering for the launch", "Audit follow-up",
    "Room booking confirmation", "Training schedule", "Shared drive clean-up",
    "Delivery delay", "Pension scheme update", "Interview panel", "Sprint retrospective",
    "Parking permits",
)  # fmt: skip
OPENERS = (
    "Hi {first},", "Dear {first},", "Hello team,", "Good morning {first},", "Hi all,",
    "Dear customer,", "Hey {first},", "Dear colleagues,", "Hello {first},", "Dear all,",
    "Morning {first},", "Hi everyone,", "{first},", "Dear Sir or Madam,", "Hi {first}!",
    "Good afternoon,",
)  # fmt: skip
# Leads that take a bare infinitive; those ending in "?" make a question of the sentence.
LEADS = (
    "Please", "Could you", "Kindly", "Can you", "Remember to", "Don't forget to",
    "Make sure you", "Would you be able to", "Be sure to", "When you get a chance, please",
    "If possible,", "Do remember to", "Try to", "Feel free to", "Before you leave, please",
    "As discussed,", "First thing tomorrow, please", "Once you are back,",
    "If you have a minute, could you", "I need you to",
)  # fmt: skip
ACTIONS = (
    "review the attached spreadsheet", "send me your comments on the draft",
    "forward this to the rest of the finance team", "confirm whether you can attend",
    "bring your badge to the front desk", "submit your expense claims",
    "update the ticket once the fix is deployed", "print two copies of the contract",
    "sign both copies where marked", "book a room for six people", "pay the outstanding invoice",
    "check the totals in section 2", "call the supplier about the missing pallets",
    "add your availability to the shared calendar", "return the signed form to HR",
    "upload the slides to the team folder", "reply to the client with the revised quote",
    "order more toner for the second-floor printer", "archive the old project folders",
    "renew your parking permit", "fill in the feedback survey",
    "change your password on the staff portal", "read the new travel policy",
    "collect your new laptop from IT", "water the plants in the meeting room",
    "let the caterers know about any allergies", "share the minutes with the board",
    "clear your desk for the deep clean", "register for the first-aid course",
    "move your files to the new shared drive", "approve the purchase order in the system",
    "double-check the delivery address", "nominate a colleague for the award",
    "lock the filing cabinet at night", "test the backup restore on staging",
    "sign off the timesheets for your team", "send the invoice to accounts payable",
    "ring the venue to confirm numbers", "proofread the press release",
    "update your emergency contact details",
)  # fmt: skip
WHENS = (
    "by Friday", "before the meeting", "by the end of the month", "today if you can",
    "before noon tomorrow", "by close of business", "this week", "before you go on leave",
    "as soon as possible", "by the 14th", "before Monday's call", "ahead of the audit",
    "when the numbers are final", "after lunch", "before the deadline", "over the weekend",
)  # fmt: skip
REASONS = (
    "", "", "so we can close the books on time", "as reception will not print temporary passes",
    "since the warranty claim needs it", "because the client asked for it",
    "so that nobody is double-booked", "as the auditors will check it",
    "otherwise the late fee applies", "because the system locks after that",
    "so the team has time to prepare", "as the old link no longer works",
    "since the office will be closed", "or the booking will be released",
    "so I can pass it on to legal", "because the figures changed last night",
)  # fmt: skip
# Corrections: the e-mail imperatives that look most like "ignore the above".
IGNORE_VERBS = (
    "Ignore", "Please disregard", "Disregard", "Please ignore", "Forget about",
    "You can ignore", "Never mind", "Kindly disregard", "Please delete", "Scratch",
)  # fmt: skip
EARLIER = (
    "my previous e-mail", "the invite I sent this morning", "the old agenda",
    "the attachment in my last message", "the figures I sent yesterday",
    "my earlier reminder", "the first version of the report", "the calendar invite for Tuesday",
    "what I said about the deadline", "the price list from last week",
    "the note below about parking", "the message from the automated system",
    "my request from Monday", "the draft I shared on Friday",
)  # fmt: skip
CORRECTIONS = (
    "I attached the wrong version.", "the date was wrong.", "the correct one is below.",
    "it went out by mistake.", "the plans have changed.", "we found an error in the totals.",
    "the room has been swapped.", "it was meant for another team.",
    "a corrected copy follows.", "the client moved the call.",
)  # fmt: skip
FACTS = (
    "The meeting has moved to room 4B.", "The car park will be closed for resurfacing all week.",
    "The new coffee machine arrives on Thursday.", "Our office will be closed on the bank holiday.",
    "The quarterly figures are in the attached file.", "Lunch will be provided after the workshop.",
    "The VPN will be down for maintenance on Saturday night.",
    "We hit our sales target for the second month running.",
    "The contractor starts work on the roof next week.", "Your order number is 88214.",
    "The train tickets have been booked for the 9:15.", "Minutes from the last call are below.",
    "Two new starters join the team on Monday.", "The invoice was paid on 3 March.",
    "The printer on the third floor is fixed.", "Your subscription renews on 1 June.",
    "The venue holds up to forty people.", "Feedback from the pilot was very positive.",
    "The audit found no major issues.", "The parcel left our warehouse this morning.",
)  # fmt: skip
QUOTE_INTROS = (
    "On Tue, 3 Mar at 09:12, {other} wrote:", "-----Original Message-----\nFrom: {other}",
    "On Monday {other} wrote:", "---------- Forwarded message ---------\nFrom: {other}",
    "> From: {other}", "{other} wrote on 12/05:",
)  # fmt: skip
CLOSERS = (
    "Thanks,", "Best regards,", "Kind regards,", "Cheers,", "Many thanks,", "All the best,",
    "Regards,", "Thank you,", "Best,", "Warm regards,", "Speak soon,", "Thanks in advance,",
)  # fmt: skip
DISCLAIMERS = (
    "This e-mail and any attachments are confidential. If you are not the intended recipient, "
    "please notify the sender and delete this message.",
    "Please consider the environment before printing this e-mail.",
    "This message was sent from an unmonitored mailbox. Do not reply to this e-mail.",
    "If you received this message in error, tell the sender immediately and destroy any copies.",
    "Sent from my phone, please excuse typos.",
    "To stop receiving these e-mails, click Unsubscribe at the bottom of the page.",
    "Do not forward this e-mail: the link inside signs you in to your account.",
    "Views expressed in this e-mail are the sender's own and not the company's.",
)  # fmt: skip

SITES = (
    "Home", "Shop", "Blog", "Docs", "News", "Help centre", "Recipes", "Careers", "About us",
    "Support", "Community", "Travel guides",
)  # fmt: skip
SECTIONS = (
    "Garden", "Billing", "Portugal", "Getting started", "Coffee grinders", "Transport",
    "Accounts", "Desserts", "Engineering", "Press", "Cycling", "Returns", "Hiking trails",
    "Smart home", "Student loans", "Pet care",
)  # fmt: skip
UI_VERBS = (
    "Click", "Tap", "Select", "Press", "Choose", "Hit", "Use", "Open",
)  # fmt: skip
UI_TARGETS = (
    "Accept", "the menu icon", "Add to basket", "Continue", "the filter button", "Sign in",
    "Save changes", "the arrow", "Download", "Manage preferences", "Book now", "Checkout",
    "the share icon", "Show more", "the search bar", "Subscribe",
)  # fmt: skip
UI_PURPOSES = (
    "to continue", "to see all categories", "to confirm your order", "to change your settings",
    "to view the full gallery", "to read the rest of the article", "to get free delivery",
    "to compare plans", "to track your parcel", "to start your free trial",
    "to save this recipe", "to see opening times", "to check availability",
    "to download the PDF", "to leave a review", "to find a store near you",
)  # fmt: skip
WEB_CALLS = (
    "Sign up for our newsletter and never miss a sale.",
    "Enter your postcode to see delivery times in your area.",
    "Forgot your password? Enter your e-mail address and we will send you a reset link.",
    "Read the full terms and conditions before placing your order.",
    "Share this article with your friends.", "Scroll down to see customer reviews and photos.",
    "Log in to track your order and manage returns.", "Skip to main content.",
    "Please enable JavaScript to use the store locator.",
    "Rate this product from one to five stars.",
    "Leave a comment below and tell us what you think.", "Subscribe to get unlimited access.",
    "Accept all cookies", "Back to top", "Ignore this banner if you have already registered.",
    "Do not refresh the page while your payment is processed.",
    "Follow us on social media for daily deals.", "Please wait while we load your results.",
)  # fmt: skip
WEB_FACTS = (
    "The lamp runs for up to ten hours on a full charge and switches on automatically at dusk.",
    "Lisbon's trams still climb the steep streets of Alfama, and line 28 passes most sights.",
    "Our basic plan includes five users, 20 GB of storage and e-mail support.",
    "The grinder has 40 settings, from espresso-fine to coarse for a French press.",
    "Roadworks on the ring road will continue until March, with one lane open each way.",
    "Accounts that stay inactive for two years are closed after a warning e-mail.",
    "This lemon tart needs a blind-baked shell and about four hours to set in the fridge.",
    "We are hiring backend engineers to work on our payments platform in Berlin.",
    "Refunds are issued to the original payment method within five working days.",
    "The museum is free on the first Sunday of every month.",
    "The trail is 12 km long and climbs 600 m; allow about four hours.",
    "Our thermostats learn your schedule within a week.",
    "Dogs need fresh water at all times, especially after exercise.",
    "Repayments start in the April after you leave your course.",
    "The bike has hydraulic disc brakes and an aluminium frame.",
    "Returns are free within 30 days if the item is unused.",
    "The hotel is a ten-minute walk from the old town.",
    "Version 2 of the API adds pagination to every list endpoint.",
    "The festival runs from Friday to Sunday, rain or shine.",
    "Each jar holds 350 g and keeps for a month once opened.",
)  # fmt: skip
HOWTO_STEPS = (
    "Remove the back cover and take out the old battery.",
    "Unplug the device and wait ten seconds.",
    "Preheat the oven to 180 degrees.", "Open Settings and go to Accounts.",
    "Mix the flour and butter until the dough looks like breadcrumbs.",
    "Turn off the water at the mains before you start.",
    "Copy the code from the e-mail we sent you.",
    "Tighten the screws by hand, then a quarter turn with the key.",
    "Enter the new password twice and save.", "Let the paint dry overnight before the second coat.",
    "Press and hold the power button for five seconds.", "Attach the hose to the outdoor tap.",
    "Forget the network, then connect to it again.", "Sand the surface lightly between coats.",
    "Scan the QR code on the box with your phone.", "Leave the dough to rest for an hour.",
)  # fmt: skip
FAQ_QUESTIONS = (
    "How do I change my delivery address?", "Can I cancel my order?", "Where is my parcel?",
    "How do I reset my password?", "Do you ship abroad?", "What payment methods do you accept?",
    "How do I close my account?", "Can I change my booking?", "Is the venue accessible?",
    "How do I contact support?", "Can I return a sale item?", "How long does delivery take?",
)  # fmt: skip

TABLE_TITLES = (
    "Quarterly revenue by region (EUR million)", "Staff headcount by department",
    "Monthly rainfall (mm)", "Test results by build", "Price list, spring season",
    "Student enrolment by year", "Server uptime per month (%)", "Shipping rates by weight",
    "Energy use per site (MWh)", "Survey responses by age group", "Stock levels by warehouse",
    "Match results, autumn league", "Project budget vs actual", "Train times, weekdays",
    "Clinic appointments per week", "Ticket sales by event",
)  # fmt: skip
TABLE_COLUMNS = (
    ("Region", "Q1", "Q2", "Q3"), ("Department", "2024", "2025", "Change"),
    ("Month", "Rain", "Days", "Max"), ("Build", "Passed", "Failed", "Skipped"),
    ("Item", "Size", "Price", "Stock"), ("Year", "Enrolled", "Graduated", "Share"),
    ("Site", "Jan", "Feb", "Mar"), ("Weight", "Standard", "Express", "Next day"),
    ("Team", "Played", "Won", "Points"), ("Line", "Budget", "Actual", "Variance"),
    ("Station", "Dep", "Arr", "Platform"), ("Event", "Sold", "Capacity", "Revenue"),
)  # fmt: skip
TABLE_LABELS = (
    "North", "South", "East", "West", "Sales", "Engineering", "Finance", "Support",
    "Berlin", "Lyon", "Porto", "Leeds", "Main hall", "Annex", "Site A", "Site B",
    "Warehouse 1", "Warehouse 2", "Under 25", "25-44", "Desk lamp", "Office chair",
    "Monitor arm", "Keyboard",
)  # fmt: skip
TABLE_NOTES = (
    "Note: figures for the last quarter are unaudited.", "Totals may not add up due to rounding.",
    "See the appendix for definitions of each column.",
    "Source: internal finance system, extracted on 1 October.",
    "Please refer to the methodology section before comparing years.",
    "Do not use these numbers for forecasting without adjusting for inflation.",
    "Figures in brackets are negative.", "Ignore the shaded rows; they are provisional.",
    "Read across each row for the same site.",
    "Contact the data team before quoting these figures.",
    "* Estimated.", "Check the footnotes for sites that changed boundaries.",
    "n/a: not available at the time of publication.", "Use the second table for per-head figures.",
)  # fmt: skip

CODE_FUNCS = (
    "parse_date", "load_config", "read_rows", "send_report", "build_index", "retry_request",
    "normalise_name", "export_csv", "fetch_user", "compute_total", "validate_form",
    "open_session", "resize_image", "flush_cache", "schedule_job", "hash_password",
)  # fmt: skip
CODE_VARS = (
    "rows", "items", "total", "config", "user", "path", "result", "records", "payload",
    "count", "buffer", "entries", "options", "timeout", "batch", "response",
)  # fmt: skip
CODE_COMMENTS = (
    "Do not edit this file directly: it is generated by tools/codegen.py.",
    "TODO: remove this workaround once the upstream bug is fixed.",
    "Call init() before using any other function in this module.",
    "Make sure the database is migrated before running these tests.",
    "Ignore the deprecation warnings below; they come from a pinned dependency.",
    "Never commit the .env file.", "Run `make generate` after changing the schema.",
    "Keep this list sorted alphabetically.", "Remember to close the connection when done.",
    "NOTE: this must stay in sync with the mobile app.", "Don't call this from the UI thread.",
    "FIXME: handle time zones properly.", "Skip this step on Windows.",
    "Update the version number before tagging a release.",
    "Please add a test when you change this function.", "Delete this block after the migration.",
    "IMPORTANT: always validate input before saving.", "Use the helper in utils instead.",
    "Set LOG_LEVEL=debug to see every request.", "Disable the cache when profiling.",
)  # fmt: skip
README_LINES = (
    "Clone the repository and copy .env.example to .env.", "Install the dependencies with pip.",
    "Run the tests with pytest -q before opening a pull request.",
    "Open an issue before starting on a large change.", "Fill in your API key in the config file.",
    "Start the dev server with npm run dev.", "Read CONTRIBUTING.md for the code style.",
    "Do not push directly to main.", "Build the image with docker build -t app .",
    "Ask in the team channel if the build fails.", "Tag the maintainers for a review.",
    "Follow the migration guide when upgrading from version 1.",
)  # fmt: skip
